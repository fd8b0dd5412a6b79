#!/bin/sh
# Issue 27 row: one fail-fast replica among 20 and 100, 1/10/50/100 clients, every policy.
cd /work/main
for s in sim-fail-fast-20 sim-fail-fast-100; do
  for c in 1 10 50 100; do
    /work/runs/pb campaign run --env sim --scenario $s --ingress-replicas $c --algorithms prequal,prequal-sync,c3,linear,rif-only,yarp-po2c,wrr,least-request,p2c,peak-ewma,ewma,round-robin,random --reps 3 --out /work/runs/ff/$s-$c > /work/runs/ff-$s-$c.log 2>&1
  done
done
echo done > /work/runs/FFDONE
