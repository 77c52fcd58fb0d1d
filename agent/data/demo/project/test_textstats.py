import unittest

from textstats import longest_word, word_count


class TextStatsTest(unittest.TestCase):
    def test_word_count_single_spaces(self):
        self.assertEqual(word_count("one two three"), 3)

    def test_word_count_any_whitespace(self):
        self.assertEqual(word_count("hello  world\n"), 2)

    def test_longest_word(self):
        self.assertEqual(longest_word("a bbb cc"), "bbb")


if __name__ == "__main__":
    unittest.main()
