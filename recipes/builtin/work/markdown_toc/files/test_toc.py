import unittest
from toc import toc

DOC = "# Title\n\n## Setup & Use\n\n```\n# not a heading\n```\n\n## Setup & Use\n"

class TestToc(unittest.TestCase):
    def test_doc(self):
        self.assertEqual(toc(DOC), "- [Title](#title)\n  - [Setup & Use](#setup--use)\n  - [Setup & Use](#setup--use-1)\n")
