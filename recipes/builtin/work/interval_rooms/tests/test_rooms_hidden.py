import random
import unittest
from rooms import allocate


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


def fewest_rooms(meetings):
    points = sorted([(s, 1) for s, _ in meetings] + [(e, -1) for _, e in meetings])
    most = now = 0
    for _, d in points:
        now += d
        most = max(most, now)
    return most


class TestRoomsHidden(unittest.TestCase):
    def test_empty(self):
        self.assertEqual(allocate([]), [])

    def test_one(self):
        self.assertEqual(allocate([(4, 9)]), [0])

    def test_all_overlapping(self):
        self.assertEqual(allocate([(0, 10), (1, 9), (2, 8)]), [0, 1, 2])

    def test_answer_in_input_order(self):
        self.assertEqual(allocate([(20, 30), (0, 10), (5, 25)]), [0, 0, 1])

    def test_ties_by_end_then_input_position(self):
        self.assertEqual(allocate([(0, 9), (0, 3), (0, 3)]), [2, 0, 1])

    def test_lowest_of_several_free_rooms(self):
        # Room 0 frees at 3, room 1 at 5: the next meeting takes 0, the
        # lowest free number, not the one freed last.
        self.assertEqual(allocate([(0, 5), (0, 10), (0, 3), (6, 8)]), [1, 2, 0, 0])
        # Room 1 frees at 3, room 0 at 5: still 0, not the one freed first.
        self.assertEqual(allocate([(0, 5), (1, 3), (6, 7)]), [0, 1, 0])

    def test_room_freed_at_the_same_instant(self):
        self.assertEqual(allocate([(0, 5), (5, 10), (10, 15)]), [0, 0, 0])

    def test_negative_and_large_times(self):
        self.assertEqual(allocate([(-10, -5), (-6, 10**12), (-5, 0)]), [0, 1, 0])

    def test_invalid_anywhere_in_the_list(self):
        with self.assertRaises(ValueError):
            allocate([(0, 1), (5, 2)])
        with self.assertRaises(ValueError):
            allocate([(0, 1), (7, 7)])

    def test_random_against_the_rules(self):
        rng = random.Random(27)
        for _ in range(200):
            meetings = []
            for _ in range(rng.randint(1, 30)):
                s = rng.randint(0, 50)
                meetings.append((s, s + rng.randint(1, 15)))
            rooms = allocate(meetings)
            self.assertEqual(len(rooms), len(meetings))
            for i in range(len(meetings)):
                for j in range(i + 1, len(meetings)):
                    if overlaps(meetings[i], meetings[j]):
                        self.assertNotEqual(rooms[i], rooms[j], (meetings, rooms))
            self.assertEqual(max(rooms) + 1, fewest_rooms(meetings), meetings)
