"""A public dictionary of colour names: the 148 named colours of CSS (W3C, "CSS Color Module
Level 4", section 6.1 "Named Colors"), written as words ("light blue", not "lightblue"), as
people type them. `ldptel demo --scenario favorite-color` uses it as the candidate list of
its open-domain campaign: the strings whose frequency the report may estimate."""

from __future__ import annotations

COLOR_NAMES = (
    "alice blue", "antique white", "aqua", "aquamarine", "azure", "beige", "bisque", "black",
    "blanched almond", "blue", "blue violet", "brown", "burly wood", "cadet blue",
    "chartreuse", "chocolate", "coral", "cornflower blue", "cornsilk", "crimson", "cyan",
    "dark blue", "dark cyan", "dark goldenrod", "dark gray", "dark green", "dark grey",
    "dark khaki", "dark magenta", "dark olive green", "dark orange", "dark orchid", "dark red",
    "dark salmon", "dark sea green", "dark slate blue", "dark slate gray", "dark slate grey",
    "dark turquoise", "dark violet", "deep pink", "deep sky blue", "dim gray", "dim grey",
    "dodger blue", "firebrick", "floral white", "forest green", "fuchsia", "gainsboro",
    "ghost white", "gold", "goldenrod", "gray", "green", "green yellow", "grey", "honeydew",
    "hot pink", "indian red", "indigo", "ivory", "khaki", "lavender", "lavender blush",
    "lawn green", "lemon chiffon", "light blue", "light coral", "light cyan",
    "light goldenrod yellow", "light gray", "light green", "light grey", "light pink",
    "light salmon", "light sea green", "light sky blue", "light slate gray",
    "light slate grey", "light steel blue", "light yellow", "lime", "lime green", "linen",
    "magenta", "maroon", "medium aquamarine", "medium blue", "medium orchid", "medium purple",
    "medium sea green", "medium slate blue", "medium spring green", "medium turquoise",
    "medium violet red", "midnight blue", "mint cream", "misty rose", "moccasin",
    "navajo white", "navy", "old lace", "olive", "olive drab", "orange", "orange red",
    "orchid", "pale goldenrod", "pale green", "pale turquoise", "pale violet red",
    "papaya whip", "peach puff", "peru", "pink", "plum", "powder blue", "purple",
    "rebecca purple", "red", "rosy brown", "royal blue", "saddle brown", "salmon",
    "sandy brown", "sea green", "seashell", "sienna", "silver", "sky blue", "slate blue",
    "slate gray", "slate grey", "snow", "spring green", "steel blue", "tan", "teal",
    "thistle", "tomato", "turquoise", "violet", "wheat", "white", "white smoke", "yellow",
    "yellow green",
)  # fmt: skip
