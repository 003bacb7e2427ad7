from calc import slugify


class TestSlugify:
    def test_accents_are_stripped(self):
        assert slugify("Crème Brûlée") == "creme-brulee"

    def test_punctuation_becomes_one_dash(self):
        assert slugify("Hello, World!  Again") == "hello-world-again"

    def test_plain_words(self):
        assert slugify("plain words") == "plain-words"
