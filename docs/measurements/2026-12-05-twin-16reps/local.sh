#!/bin/sh
cd /work/main
./bin/prequalbench campaign run --env local --scenario paper-fig7-90-small --algorithms prequal,c3,least-request,p2c --reps 16 --out /work/runs/fig7 > /work/runs/fig7.log 2>&1
./bin/prequalbench campaign run --env local --scenario paper-fig6-ramp-small --algorithms prequal,c3,least-request,p2c --reps 3 --out /work/runs/fig6 > /work/runs/fig6.log 2>&1
echo done > /work/runs/DONE
