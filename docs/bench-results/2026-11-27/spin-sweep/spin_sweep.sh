#!/bin/bash
# spin budget sweep: oversubscription bench per LIBLOCK_SPIN_NS value, rounds interleaved
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=${OUT:-results/spin-sweep}  # (the recorded run wrote to /tmp/b27/spin; LIBLOCK_SPIN_NS fixes the budget)
mkdir -p $out
for round in 1 2; do
  for ns in 2000 8000 20000 60000; do
    LIBLOCK_SPIN_NS=$ns python3 tools/liblock bench oversubscription --quiet --no-plot --reps 2 \
      --locks posix,mcs,mcscr,lifocr,mcs-tp,cc-synch,flat-combining,hybcomb,ttas --out $out/r$round-$ns >/dev/null 2>&1
  done
done
