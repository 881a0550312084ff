"""pyqueue - an ordinary Python program: queue.Queue with THREADS threads
(half producers, half consumers).

Part of the application benchmark (`liblock bench apps`): run
unmodified under glibc and under the interposer (CPython's GIL and its
locks are pthread mutexes, condition variables and semaphores).  Producer p
puts p+1, p+1+P, ... up to ITEMS; then one None per consumer stops them.
Prints "ok" and exits 0 only if exactly ITEMS values summing to
ITEMS*(ITEMS+1)/2 came out.

usage: python3 pyqueue.py THREADS ITEMS [CAPACITY]   (CAPACITY default 16)
"""
import queue
import sys
import threading


def main():
    if len(sys.argv) < 3:
        print("usage: pyqueue.py THREADS ITEMS [CAPACITY]", file=sys.stderr)
        return 2
    threads, items = int(sys.argv[1]), int(sys.argv[2])
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    if threads < 2 or items < 1 or cap < 1:
        print("pyqueue: THREADS >= 2, ITEMS >= 1, CAPACITY >= 1", file=sys.stderr)
        return 2
    np_ = threads // 2
    nc = threads - np_
    q = queue.Queue(maxsize=cap)
    sums = [0] * nc
    counts = [0] * nc

    def consumer(c):
        while True:
            v = q.get()
            if v is None:
                return
            sums[c] += v
            counts[c] += 1

    def producer(p):
        for v in range(p + 1, items + 1, np_):
            q.put(v)

    cs = [threading.Thread(target=consumer, args=(c,)) for c in range(nc)]
    ps = [threading.Thread(target=producer, args=(p,)) for p in range(np_)]
    for t in cs + ps:
        t.start()
    for t in ps:
        t.join()
    for _ in range(nc):
        q.put(None)
    for t in cs:
        t.join()
    want = items * (items + 1) // 2
    if sum(counts) != items or sum(sums) != want:
        print(f"FAILED items={sum(counts)} sum={sum(sums)} want items={items} sum={want}")
        return 1
    print(f"ok items={sum(counts)} sum={sum(sums)} producers={np_} consumers={nc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
