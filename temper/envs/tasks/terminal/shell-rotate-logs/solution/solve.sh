#!/bin/bash
set -euo pipefail
cd /app
cat > rotate.sh <<'EOF'
#!/bin/bash
set -euo pipefail
cd /app/var/log
files=$(ls app-????????.log 2>/dev/null | sort -r || true)
n=0
for f in $files; do
    n=$((n + 1))
    if [ $n -gt 3 ]; then rm -f "$f"; elif [ $n -gt 1 ]; then gzip -f "$f"; fi
done
EOF
chmod +x rotate.sh
./rotate.sh
