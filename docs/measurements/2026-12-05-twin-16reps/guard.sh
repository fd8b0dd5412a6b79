#!/bin/sh
# Issue 27: does the paper-scale winner cost another regime? usage: guard.sh 'prequal{among=3}'
cd /work/main
V="$1"
for s in c2-hetero-open hetero16-90 capacity-48-ingress3-80 c6-burst paper-fig7-90-small; do
  /work/runs/pb campaign run --env sim --scenario $s --algorithms "prequal,$V,least-request,c3" --reps 3 --out /work/runs/guard > /work/runs/guard-$s.log 2>&1
done
/work/runs/pb campaign run --env sim --scenario sim-three-speeds-70 --algorithms "prequal,$V,prequal{probes=1,remove=0.25},prequal{probes=0.5,remove=0.25},$(echo "$V" | sed 's/}$/,probes=1,remove=0.25}/'),$(echo "$V" | sed 's/}$/,probes=0.5,remove=0.25}/'),least-request" --reps 3 --out /work/runs/guard > /work/runs/guard-three.log 2>&1
echo done > /work/runs/GUARDDONE
