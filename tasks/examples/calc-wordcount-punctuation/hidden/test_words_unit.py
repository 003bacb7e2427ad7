import unittest

from calc import word_count


class WordCountTest(unittest.TestCase):
    def test_punctuation_is_not_a_word(self):
        self.assertEqual(word_count("Hello , world - again !"), 3)

    def test_contractions_are_one_word(self):
        self.assertEqual(word_count("don't stop"), 2)

    def test_plain(self):
        self.assertEqual(word_count("a b c"), 3)


if __name__ == "__main__":
    unittest.main()
