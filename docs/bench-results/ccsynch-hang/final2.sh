#!/bin/bash
flock /work/bench.lock /tmp/ccsh/loaded.sh 2 cc-synch 150 >> /tmp/ccsh/driver.log 2>&1
sleep 3
flock /work/bench.lock /tmp/ccsh/loaded.sh 2 dsm-synch 150 >> /tmp/ccsh/driver.log 2>&1
echo FINAL2-DONE >> /tmp/ccsh/driver.log
