#!/bin/sh
# Does foreign CPU on the host inflate a local run's p99? c3 with two burners at 12% of a core each (about the extra host CPU prequal's probes cost).
cd /work/main
python3 /work/runs/burn.py 0.12 900 & B1=$!
python3 /work/runs/burn.py 0.12 900 & B2=$!
./bin/prequalbench campaign run --env local --scenario paper-fig7-90-small --algorithms c3,least-request --reps 4 --seed 7 --out /work/runs/burn > /work/runs/burn.log 2>&1
kill $B1 $B2
echo done > /work/runs/BURNDONE
