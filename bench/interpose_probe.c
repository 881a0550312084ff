/* interpose_probe: print the CPU0<->CPU1 ping-pong round trip (bench/probe.h)
 * in ns, for shell-driven benchmarks (bench/interpose_apps.sh) to record
 * before and after each run.  Prints -1 on a single-CPU machine. */
#include <stdio.h>
#include <unistd.h>

#include "probe.h"

int main(void)
{
    printf("%.0f\n", sysconf(_SC_NPROCESSORS_ONLN) > 1 ? probe_default() : -1.0);
    return 0;
}
