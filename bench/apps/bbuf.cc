// bbuf - an ordinary C++ program: a bounded buffer on std::mutex and two
// std::condition_variable, THREADS threads (half producers, half consumers).
//
// Part of the application benchmark (`liblock bench apps`): it is
// run unmodified under glibc and under the interposer.  It knows nothing of
// liblock.  Producer p pushes the values p+1, p+1+P, ... up to ITEMS; when
// the producers are done, main pushes one 0 per consumer to stop them.  The
// consumers add up what they pop; the program prints "ok" and exits 0 only
// if exactly ITEMS values summing to ITEMS*(ITEMS+1)/2 came out.
//
// usage: bbuf THREADS ITEMS [CAPACITY]   (CAPACITY default 16)
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

class BoundedBuffer {
public:
    explicit BoundedBuffer(size_t cap) : cap_(cap) {}
    void push(unsigned long v)
    {
        std::unique_lock<std::mutex> l(m_);
        not_full_.wait(l, [&] { return q_.size() < cap_; });
        q_.push_back(v);
        l.unlock();
        not_empty_.notify_one();
    }
    unsigned long pop()
    {
        std::unique_lock<std::mutex> l(m_);
        not_empty_.wait(l, [&] { return !q_.empty(); });
        unsigned long v = q_.front();
        q_.pop_front();
        l.unlock();
        not_full_.notify_one();
        return v;
    }

private:
    std::mutex m_;
    std::condition_variable not_full_, not_empty_;
    std::deque<unsigned long> q_;
    size_t cap_;
};

} // namespace

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: bbuf THREADS ITEMS [CAPACITY]\n");
        return 2;
    }
    long threads = std::atol(argv[1]), items = std::atol(argv[2]), cap = argc > 3 ? std::atol(argv[3]) : 16;
    if (threads < 2 || items < 1 || cap < 1) {
        std::fprintf(stderr, "bbuf: THREADS >= 2, ITEMS >= 1, CAPACITY >= 1\n");
        return 2;
    }
    long np = threads / 2, nc = threads - np;
    BoundedBuffer buf((size_t)cap);
    std::vector<unsigned long> sums(nc), counts(nc);
    std::vector<std::thread> ts;
    for (long c = 0; c < nc; c++)
        ts.emplace_back([&, c] {
            for (;;) {
                unsigned long v = buf.pop();
                if (!v)
                    break;
                sums[c] += v;
                counts[c]++;
            }
        });
    std::vector<std::thread> ps;
    for (long p = 0; p < np; p++)
        ps.emplace_back([&, p] {
            for (long v = p + 1; v <= items; v += np)
                buf.push((unsigned long)v);
        });
    for (auto &t : ps)
        t.join();
    for (long c = 0; c < nc; c++)
        buf.push(0);
    for (auto &t : ts)
        t.join();
    unsigned long sum = 0, count = 0;
    for (long c = 0; c < nc; c++)
        sum += sums[c], count += counts[c];
    unsigned long want = (unsigned long)items * ((unsigned long)items + 1) / 2;
    if (count != (unsigned long)items || sum != want) {
        std::printf("FAILED items=%lu sum=%lu want items=%ld sum=%lu\n", count, sum, items, want);
        return 1;
    }
    std::printf("ok items=%lu sum=%lu producers=%ld consumers=%ld\n", count, sum, np, nc);
    return 0;
}
