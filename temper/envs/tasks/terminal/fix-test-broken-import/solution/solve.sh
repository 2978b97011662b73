#!/bin/bash
set -euo pipefail
cd /app
sed -i 's/from shop.pricing import apply_discount/from shop.pricing import discounted as apply_discount/' repo/shop/cart.py
