#!/bin/bash
set -e
cat > /app/style.css <<'CSS'
body { margin: 0; font-family: sans-serif; background: #ffffff; color: #222222; }
header { background: #2e7d32; padding: 16px 24px; }
#title { color: #ffffff; margin: 0 0 4px; }
#tagline { color: #ffffff; margin: 0; }
main { padding: 16px 24px; }
#intro { color: #595959; font-size: 18px; }
#notice { background: #fff3cd; padding: 14px 18px; border-radius: 6px; }
#notice-text { color: #664d03; font-size: 22px; }
.links { padding-left: 20px; }
a { color: #0b57d0; }
#fine-print { color: #666666; font-size: 13px; }
footer { background: #333333; padding: 12px 24px; }
#footer-text { color: #cccccc; margin: 0; }
CSS
