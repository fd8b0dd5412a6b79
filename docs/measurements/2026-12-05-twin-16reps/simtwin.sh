#!/bin/sh
cd /work/main
/work/runs/pb campaign run --env sim --scenario paper-fig7-90-small --algorithms prequal,c3,least-request,p2c --reps 16 --seed 1 --out /work/runs/simtwin > /work/runs/simtwin-fig7.log 2>&1
/work/runs/pb campaign run --env sim --scenario paper-fig6-ramp-small --algorithms prequal,c3,least-request,p2c --reps 2 --seed 1 --out /work/runs/simtwin > /work/runs/simtwin-fig6.log 2>&1
/work/runs/pb campaign run --env sim --scenario /work/runs/paper-fig6-ramp-small-hard.yaml --algorithms prequal,c3,least-request,p2c --reps 2 --seed 1 --out /work/runs/simtwin > /work/runs/simtwin-fig6hard.log 2>&1
/work/runs/pb campaign run --env sim --scenario paper-fig6-ramp-small --algorithms prequal,c3,least-request,p2c --reps 10 --seed 1 --out /work/runs/simtwin10 > /work/runs/simtwin-fig6-10.log 2>&1
/work/runs/pb campaign run --env sim --scenario /work/runs/paper-fig6-ramp-small-hard.yaml --algorithms prequal,c3,least-request,p2c --reps 10 --seed 1 --out /work/runs/simtwin10 > /work/runs/simtwin-fig6hard-10.log 2>&1
echo done > /work/runs/SIMTWINDONE
