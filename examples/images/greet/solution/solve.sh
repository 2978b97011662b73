#!/bin/bash
python3 /app/greet.py > /app/greeting.txt
