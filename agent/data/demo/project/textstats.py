"""Small text statistics helpers."""


def word_count(text):
    """Number of words in `text`, separated by any run of whitespace."""
    return len(text.split(" "))


def longest_word(text):
    """The longest word in `text` (the first one on ties), or "" for no words."""
    return max(text.split(), key=len, default="")
