#!/bin/bash
mkdir -p /logs/verifier
PYTHONPATH=/tests python3 /tests/verify.py
