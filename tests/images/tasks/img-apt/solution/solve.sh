#!/bin/bash
set -e
apt-get install -y /opt/debs/temper-hello_1.0_all.deb
