#!/bin/bash
set -e
cd /app
optipng -quiet -o2 icons/*.png
for f in icons/*.png; do
  read -r w h < <(python3 -c 'import sys; from PIL import Image; print(*Image.open(sys.argv[1]).size)' "$f")
  sed -i "s|<img src=\"$f\"|<img src=\"$f\" width=\"$w\" height=\"$h\"|" index.html
done
grep -q 'gear.png" width="64" height="64"' index.html
