#!/bin/sh
cd /work/main
while pgrep -f "campaign run --env local --scenario paper-fig7-90-small" >/dev/null; do sleep 5; done
./bin/prequalbench campaign run --env local --scenario paper-fig6-ramp-small --algorithms prequal,c3,least-request,p2c --reps 2 --out /work/runs/fig6 > /work/runs/fig6.log 2>&1
./bin/prequalbench campaign run --env local --scenario /work/runs/paper-fig6-ramp-small-hard.yaml --algorithms prequal,c3,least-request,p2c --reps 2 --out /work/runs/fig6hard > /work/runs/fig6hard.log 2>&1
echo done > /work/runs/DONE
