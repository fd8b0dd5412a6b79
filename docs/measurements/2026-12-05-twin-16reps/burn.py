import time, sys
# Burn about DUTY of one core in 10 ms cycles until killed or LIMIT seconds pass.
duty = float(sys.argv[1]); limit = float(sys.argv[2])
end = time.time() + limit
while time.time() < end:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.01 * duty:
        pass
    time.sleep(0.01 * (1 - duty))
