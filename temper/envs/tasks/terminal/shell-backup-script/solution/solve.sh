#!/bin/bash
set -euo pipefail
cd /app
cat > backup.sh <<'EOF'
#!/bin/bash
set -euo pipefail
dir=${1:-}
if [ ! -d "$dir" ]; then echo "backup.sh: not a folder: $dir" >&2; exit 1; fi
dir=$(cd "$dir" && pwd)
mkdir -p /app/backups
out="/app/backups/$(basename "$dir").tar.gz"
tar -czf "$out" -C "$(dirname "$dir")" "$(basename "$dir")"
echo "$out"
EOF
chmod +x backup.sh
