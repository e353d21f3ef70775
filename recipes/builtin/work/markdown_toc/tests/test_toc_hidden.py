import unittest
from toc import toc


class TestTocHidden(unittest.TestCase):
    def test_no_headings(self):
        self.assertEqual(toc("just text\n\nmore text\n"), "")
        self.assertEqual(toc(""), "")

    def test_top_is_the_smallest_level_present(self):
        self.assertEqual(toc("### Deep\n## Up\n### Down\n"), "  - [Deep](#deep)\n- [Up](#up)\n  - [Down](#down)\n")

    def test_all_six_levels_and_not_seven(self):
        doc = "".join("#" * n + f" L{n}\n" for n in range(1, 8))
        want = "".join("  " * (n - 1) + f"- [L{n}](#l{n})\n" for n in range(1, 7))
        self.assertEqual(toc(doc), want)

    def test_hash_without_space_is_not_a_heading(self):
        self.assertEqual(toc("#hashtag\n# Real\n"), "- [Real](#real)\n")

    def test_closing_hashes_are_not_the_title(self):
        self.assertEqual(toc("## Install ##\n"), "- [Install](#install)\n")

    def test_tilde_fences_and_info_strings(self):
        doc = "# A\n~~~\n# no\n~~~\n```python\n# comment\n```\n# B\n"
        self.assertEqual(toc(doc), "- [A](#a)\n- [B](#b)\n")

    def test_fence_closed_only_by_its_own_kind(self):
        doc = "# A\n```\n~~~\n# still code\n```\n# B\n"
        self.assertEqual(toc(doc), "- [A](#a)\n- [B](#b)\n")

    def test_slug_punctuation(self):
        doc = "# Hello, World!\n# C++ & Go\n# snake_case-name\n# Version 2.0 (beta)\n"
        want = ("- [Hello, World!](#hello-world)\n- [C++ & Go](#c--go)\n"
                "- [snake_case-name](#snake_case-name)\n- [Version 2.0 (beta)](#version-20-beta)\n")
        self.assertEqual(toc(doc), want)

    def test_unicode_letters_kept(self):
        self.assertEqual(toc("# Café Ünïcode\n"), "- [Café Ünïcode](#café-ünïcode)\n")

    def test_repeated_slugs_numbered(self):
        doc = "# Notes\n## Notes\n## notes\n# Other\n"
        want = "- [Notes](#notes)\n  - [Notes](#notes-1)\n  - [notes](#notes-2)\n- [Other](#other)\n"
        self.assertEqual(toc(doc), want)
