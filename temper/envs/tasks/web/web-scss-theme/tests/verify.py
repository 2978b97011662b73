"""Recompile the agent's SCSS with sassc and compare it with its styles.css, check that only `$brand` changed in
the source, then render the page and score the new colour where the instruction puts it, one component each."""

import re
import subprocess
from pathlib import Path

import webcheck

BRAND, DARKER = (217, 72, 15), (169, 56, 12)  # #d9480f and sassc's darken(#d9480f, 10%), #a9380c
STYLES = ("nested", "expanded", "compact", "compressed")
ORIGINAL = """$brand: #1f6feb;
$text: #24292f;
$muted: #57606a;
$radius: 6px;
$gap: 16px;
@mixin button($bg) { display: inline-block; padding: 10px 18px; border: none; border-radius: $radius;
  background-color: $bg; color: #fff; font-weight: bold; text-decoration: none; }
body { margin: 0; font-family: sans-serif; color: $text; }
.header { padding: $gap $gap * 1.5; background-color: $brand;
  h1 { margin: 0; color: #fff; font-size: 28px; } }
.content { max-width: 720px; margin: $gap * 2 auto; padding: 0 $gap;
  p { color: $muted; line-height: 1.5; }
  a { color: darken($brand, 10%); }
  .cta { @include button($brand); } }"""
DECLARED = re.compile(r"\$brand:([^;]*);")


def squeeze(text: str) -> str:
    """The text without whitespace, `//` comments and a source-map comment."""
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return re.sub(r"\s+", "", re.sub(r"/\*#\s*sourceMappingURL=[^*]*\*/", "", text))


def compiled(scss: Path, css: Path) -> bool:
    if not (scss.is_file() and css.is_file()):
        return False
    made = squeeze(css.read_text(errors="replace"))
    for style in STYLES:
        out = subprocess.run(["sassc", "-t", style, str(scss)], capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and squeeze(out.stdout) == made:
            return True
    return False


def only_brand_changed(scss: Path) -> bool:
    if not scss.is_file():
        return False
    source = squeeze(scss.read_text(errors="replace"))
    values = DECLARED.findall(source)
    return (len(values) == 1 and values[0].lower() == "#d9480f"
            and DECLARED.sub("$brand:X;", source) == DECLARED.sub("$brand:X;", squeeze(ORIGINAL)))


def check(c: webcheck.Checks) -> None:
    c.score("compiled", compiled(Path("/app/styles.scss"), Path("/app/styles.css")))
    c.score("variable_changed", only_brand_changed(Path("/app/styles.scss")))
    page = c.open("index.html", width=1000, height=700)
    header = webcheck.boxes(page, ".header")
    c.score("header_colour", webcheck.style(page, ".header", "background-color") == "rgb(217, 72, 15)")
    shot = c.screenshot(page)
    c.score("header_pixel", len(header) == 1 and header[0]["w"] > 10 and header[0]["h"] > 10
            and webcheck.near(shot.getpixel((int(header[0]["x"]) + 4, int(header[0]["y"]) + 4)), BRAND, 4))
    c.score("button_colour", webcheck.style(page, ".content .cta", "background-color") == "rgb(217, 72, 15)")
    c.score("link_colour", webcheck.style(page, ".content p a", "color") == "rgb(169, 56, 12)")


webcheck.run(["compiled", "variable_changed", "header_colour", "header_pixel", "button_colour", "link_colour",
              "no_console_errors"], check)
