#!/bin/bash
set -e
cd /app
sed -i 's/^\$brand: #1f6feb;/$brand: #d9480f;/' styles.scss
grep -q '^\$brand: #d9480f;' styles.scss
sassc -t expanded styles.scss styles.css
