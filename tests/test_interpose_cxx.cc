// test_interpose_cxx - libstdc++ locking under the interposer.
//
// std::mutex, std::recursive_mutex, std::timed_mutex and
// std::condition_variable reach pthread_mutex_* / pthread_cond_* (and
// pthread_mutex_clocklock / pthread_cond_clockwait) through the PLT, so the
// interposer replaces them.  test_interpose (the driver) runs this program
// under every algorithm; run alone it checks the same things against glibc.
// Exact results; a watchdog (alarm) turns a deadlock into a failure.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

static int failures, checks;
#define CHECK(c)                                                              \
    do {                                                                      \
        checks++;                                                             \
        if (!(c)) {                                                           \
            failures++;                                                       \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
        }                                                                     \
    } while (0)

static void on_alarm(int)
{
    static const char msg[] = "FAIL: test_interpose_cxx watchdog expired (deadlock?)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

int main()
{
    std::signal(SIGALRM, on_alarm);
    alarm(40);
    using namespace std::chrono;
    const char *want = std::getenv("LIBLOCK_LOCK");
    if (want && *want) {
        auto active = reinterpret_cast<const char *(*)()>(dlsym(RTLD_DEFAULT, "liblock_interpose_lock"));
        CHECK(active != nullptr);
        CHECK(active && active() && std::strcmp(active(), want) == 0);
    }

    // std::mutex: counter
    {
        std::mutex m;
        long counter = 0;
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; t++)
            ts.emplace_back([&] {
                for (int i = 0; i < 3000; i++) {
                    std::lock_guard<std::mutex> g(m);
                    counter++;
                }
            });
        for (auto &t : ts)
            t.join();
        CHECK(counter == 12000);
        CHECK(m.try_lock());
        bool other = true;
        std::thread([&] { other = m.try_lock(); }).join();
        CHECK(!other);
        m.unlock();
    }
    // many short-lived std::mutex objects (zero-initialised, never destroyed through pthread)
    {
        long sum = 0;
        for (int i = 0; i < 1000; i++) {
            std::mutex m;
            std::lock_guard<std::mutex> g(m);
            sum += i;
        }
        CHECK(sum == 999L * 1000 / 2);
    }
    // heap std::mutex objects created and deleted (no pthread_mutex_destroy):
    // the interposer's memory stays bounded
    {
        auto wrappers = reinterpret_cast<long (*)()>(dlsym(RTLD_DEFAULT, "liblock_interpose_debug_wrappers"));
        if (want && *want)
            CHECK(wrappers != nullptr);
        long before = wrappers ? wrappers() : 0;
        for (int i = 0; i < 20000; i++) {
            auto *m = new std::mutex;
            m->lock();
            m->unlock();
            delete m;
        }
        // The interposer reuses the idle wrapper left at an address before
        // allocating, so the same address keeps coming back and growth stays
        // at a handful; a leak per object would be 20,000.
        if (wrappers) {
            long grew = wrappers() - before;
            if (grew >= 200)
                std::fprintf(stderr, "wrappers grew by %ld\n", grew);
            CHECK(grew < 200);
        }
    }
    // std::recursive_mutex
    {
        std::recursive_mutex r;
        r.lock();
        r.lock();
        CHECK(r.try_lock());
        bool other = true;
        std::thread([&] { other = r.try_lock(); }).join();
        CHECK(!other);
        r.unlock();
        r.unlock();
        r.unlock();
        std::thread([&] { other = r.try_lock(); if (other) r.unlock(); }).join();
        CHECK(other);
    }
    // std::timed_mutex: try_lock_for / try_lock_until on a held and a released mutex
    {
        std::timed_mutex tm;
        std::atomic<int> phase{0};
        std::thread holder([&] {
            tm.lock();
            phase = 1;
            while (phase != 2)
                std::this_thread::sleep_for(milliseconds(1));
            std::this_thread::sleep_for(milliseconds(20));
            tm.unlock();
        });
        while (phase != 1)
            std::this_thread::yield();
        auto t0 = steady_clock::now();
        CHECK(!tm.try_lock_for(milliseconds(30)));
        CHECK(steady_clock::now() - t0 >= milliseconds(30));
        CHECK(!tm.try_lock_until(system_clock::now() + milliseconds(20)));
        phase = 2;
        CHECK(tm.try_lock_for(seconds(20)));
        tm.unlock();
        holder.join();
    }
    // std::condition_variable: bounded buffer, then timeouts
    {
        std::mutex m;
        std::condition_variable not_full, not_empty;
        std::deque<long> q;
        const int per = 1500;
        long sum = 0, got = 0;
        std::vector<std::thread> ts;
        for (int p = 0; p < 2; p++)
            ts.emplace_back([&, p] {
                for (int i = 1; i <= per; i++) {
                    std::unique_lock<std::mutex> lk(m);
                    not_full.wait(lk, [&] { return q.size() < 4; });
                    q.push_back(i + p * 100000L);
                    not_empty.notify_one();
                }
            });
        for (int c = 0; c < 2; c++)
            ts.emplace_back([&] {
                for (int i = 0; i < per; i++) {
                    std::unique_lock<std::mutex> lk(m);
                    not_empty.wait(lk, [&] { return !q.empty(); });
                    sum += q.front();
                    q.pop_front();
                    got++;
                    not_full.notify_one();
                }
            });
        for (auto &t : ts)
            t.join();
        CHECK(got == 2L * per);
        CHECK(sum == (long)per * (per + 1) + 100000L * per);

        std::unique_lock<std::mutex> lk(m);
        auto t0 = steady_clock::now();
        CHECK(not_full.wait_for(lk, milliseconds(30)) == std::cv_status::timeout);
        CHECK(steady_clock::now() - t0 >= milliseconds(30));
        CHECK(not_full.wait_until(lk, system_clock::now() + milliseconds(10)) == std::cv_status::timeout);
        bool other = true;
        std::thread([&] { other = m.try_lock(); if (other) m.unlock(); }).join();
        CHECK(!other); // held again after the timed waits
    }
    // notify_all wakes every waiter
    {
        std::mutex m;
        std::condition_variable cv;
        bool go = false;
        int woken = 0;
        std::vector<std::thread> ts;
        for (int i = 0; i < 3; i++)
            ts.emplace_back([&] {
                std::unique_lock<std::mutex> lk(m);
                cv.wait(lk, [&] { return go; });
                woken++;
            });
        std::this_thread::sleep_for(milliseconds(20));
        {
            std::lock_guard<std::mutex> g(m);
            go = true;
        }
        cv.notify_all();
        for (auto &t : ts)
            t.join();
        CHECK(woken == 3);
    }
    std::printf("test_interpose_cxx[%s]: %d checks, %d failed\n", want ? want : "glibc", checks, failures);
    return failures ? 1 : 0;
}
