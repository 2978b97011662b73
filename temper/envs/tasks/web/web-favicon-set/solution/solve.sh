#!/bin/bash
set -e
cd /app
magick logo.png -resize 16x16 favicon-16.png
magick logo.png -resize 32x32 favicon-32.png
magick logo.png -resize 180x180 apple-touch-icon.png
magick favicon-16.png favicon-32.png favicon.ico
sed -i 's|^  <title>.*</title>$|&\
  <link rel="icon" type="image/png" sizes="16x16" href="favicon-16.png">\
  <link rel="icon" type="image/png" sizes="32x32" href="favicon-32.png">\
  <link rel="icon" href="favicon.ico" sizes="any">\
  <link rel="apple-touch-icon" sizes="180x180" href="apple-touch-icon.png">|' index.html
grep -q apple-touch-icon.png index.html
