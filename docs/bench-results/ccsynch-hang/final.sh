#!/bin/bash
NEW=/work/wt-ccsynch-hang/build/bin/lockbench
flock /work/bench.lock bash -c "/tmp/ccsh/symptom.sh /tmp/ccsh/lockbench-main cc-synch; /tmp/ccsh/symptom.sh $NEW cc-synch" >> /tmp/ccsh/symptom.log 2>&1
sleep 3
flock /work/bench.lock /tmp/ccsh/loaded.sh 2 cc-synch 100 -w yield >> /tmp/ccsh/driver.log 2>&1
sleep 3
flock /work/bench.lock /tmp/ccsh/loaded.sh 2 dsm-synch 100 -w yield >> /tmp/ccsh/driver.log 2>&1
sleep 3
PREFIX="taskset -c 0" flock /work/bench.lock /tmp/ccsh/loaded.sh 0 cc-synch 100 -p none -w yield >> /tmp/ccsh/driver.log 2>&1
echo FINAL-DONE >> /tmp/ccsh/driver.log
