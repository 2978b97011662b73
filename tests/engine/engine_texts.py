"""Public-domain English passages for quality checks and benchmarks (no download needed)."""

TALE = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it "
    "was the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything "
    "before us, we had nothing before us, we were all going direct to Heaven, we were all going direct the "
    "other way; in short, the period was so far like the present period, that some of its noisiest "
    "authorities insisted on its being received, for good or for evil, in the superlative degree of "
    "comparison only. There were a king with a large jaw and a queen with a plain face, on the throne of "
    "England; there were a king with a large jaw and a queen with a fair face, on the throne of France. In "
    "both countries it was clearer than crystal to the lords of the State preserves of loaves and fishes, "
    "that things in general were settled for ever. It was the year of Our Lord one thousand seven hundred and "
    "seventy-five. Spiritual revelations were conceded to England at that favoured period, as at this. "
    "Mrs. Southcott had recently attained her five-and-twentieth blessed birthday, of whom a prophetic "
    "private in the Life Guards had heralded the sublime appearance by announcing that arrangements were "
    "made for the swallowing up of London and Westminster. Even the Cock-lane ghost had been laid only a "
    "round dozen of years, after rapping out its messages, as the spirits of this very year last past "
    "(supernaturally deficient in originality) rapped out theirs."
)

DECLARATION = (
    "When in the Course of human events, it becomes necessary for one people to dissolve the political bands "
    "which have connected them with another, and to assume among the powers of the earth, the separate and "
    "equal station to which the Laws of Nature and of Nature's God entitle them, a decent respect to the "
    "opinions of mankind requires that they should declare the causes which impel them to the separation. "
    "We hold these truths to be self-evident, that all men are created equal, that they are endowed by their "
    "Creator with certain unalienable Rights, that among these are Life, Liberty and the pursuit of "
    "Happiness. That to secure these rights, Governments are instituted among Men, deriving their just "
    "powers from the consent of the governed, That whenever any Form of Government becomes destructive of "
    "these ends, it is the Right of the People to alter or to abolish it, and to institute new Government, "
    "laying its foundation on such principles and organizing its powers in such form, as to them shall seem "
    "most likely to effect their Safety and Happiness. Prudence, indeed, will dictate that Governments long "
    "established should not be changed for light and transient causes; and accordingly all experience hath "
    "shewn, that mankind are more disposed to suffer, while evils are sufferable, than to right themselves "
    "by abolishing the forms to which they are accustomed. But when a long train of abuses and usurpations, "
    "pursuing invariably the same Object evinces a design to reduce them under absolute Despotism, it is "
    "their right, it is their duty, to throw off such Government, and to provide new Guards for their future "
    "security."
)

CODE = '''def parse_config(path, defaults=None, strict=True):
    """Read a simple key=value configuration file into a dictionary."""
    result = dict(defaults or {})
    errors = []
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                errors.append(f"{path}:{number}: expected key=value, got {line!r}")
                continue
            key, value = line.split("=", 1)
            key = key.strip()
            value = value.strip()
            if not key:
                errors.append(f"{path}:{number}: empty key")
                continue
            if value.lower() in ("true", "yes", "on"):
                value = True
            elif value.lower() in ("false", "no", "off"):
                value = False
            elif value.isdigit():
                value = int(value)
            else:
                try:
                    value = float(value)
                except ValueError:
                    pass
            if strict and key in result and key not in (defaults or {}):
                errors.append(f"{path}:{number}: duplicate key {key!r}")
                continue
            result[key] = value
    if errors:
        raise ValueError("\\n".join(errors))
    return result


def merge_configs(*configs):
    """Merge dictionaries left to right; later values win."""
    merged = {}
    for config in configs:
        for key, value in config.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = merge_configs(merged[key], value)
            else:
                merged[key] = value
    return merged


def describe(config):
    """One line per key, sorted, for logs."""
    lines = []
    for key in sorted(config):
        lines.append(f"{key} = {config[key]!r}")
    return "\\n".join(lines)
'''
