#!/bin/bash
set -e
useradd -m alice
mkdir -p /srv/shared && chown alice:alice /srv/shared
su alice -c "touch /srv/shared/alice.txt"
