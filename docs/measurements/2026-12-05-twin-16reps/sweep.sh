#!/bin/sh
# Issue 27: which pool knob closes prequal's gap to c3 and prequal-sync at 100 x 100?
cd /work/main
A='prequal,prequal-sync,c3,rif-only,prequal{pool=4},prequal{pool=8},prequal{maxage=100ms},prequal{maxage=250ms},prequal{probes=5},prequal{remove=2},prequal{qrif=0.6},prequal{tol=0},prequal{reuse=1},prequal{reuselat=0},prequal{reuselat=0,tol=0},prequal{among=2},prequal{among=3},prequal{among=4}'
for s in paper-fig7-90 paper-fig7-70; do
  /work/runs/pb campaign run --env sim --scenario $s --algorithms "$A" --reps 5 --out /work/runs/sweep > /work/runs/sweep-$s.log 2>&1
done
echo done > /work/runs/SWEEPDONE
