#!/bin/bash
set -e
cd /app
for w in 400 800 1600; do
  magick photo.jpg -resize "${w}x" -strip -quality 82 "photo-$w.jpg"
done
sed -i 's|<img id="hero" src="photo.jpg"|<img id="hero" src="photo-800.jpg" srcset="photo-400.jpg 400w, photo-800.jpg 800w, photo-1600.jpg 1600w" sizes="100vw"|' index.html
grep -q 'srcset=' index.html
