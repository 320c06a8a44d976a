"""The checks a representative run's processes make of the groups and pipelines their program
builds (fakegpu/representative.py, called by the ranks' hook): which ranks must run as processes,
and the list they name."""

import unittest

from fakegpu.representative import NeedsProcesses, check_group_ranks, check_stage_ranks


class GroupRanks(unittest.TestCase):
    def test_a_group_led_by_a_process_or_without_this_process_passes(self):
        check_group_ranks([0, 4], 0, "0,1")
        check_group_ranks([1, 5], 1, "0,1")
        check_group_ranks([3, 7], 1, "0,1")  # rank 1 is not in it

    def test_a_process_in_a_group_whose_first_rank_runs_none_names_the_list(self):
        with self.assertRaises(NeedsProcesses) as caught:
            check_group_ranks([7, 3], 7, "0,7")
        self.assertEqual(caught.exception.processes, "0,3,7")
        self.assertIn("its first rank, 3, runs none", str(caught.exception))


class StageRanks(unittest.TestCase):
    def test_every_stage_of_every_first_stage_process_is_named_at_once(self):
        # Processes 0 and 1, a pipeline of 2 stages over 8 ranks: both ask for 0,1,4,5.
        for rank_pipeline in ([0, 4], [1, 5]):
            with self.assertRaises(NeedsProcesses) as caught:
                check_stage_ranks(rank_pipeline, 2, 8, "0,1")
            self.assertEqual(caught.exception.processes, "0,1,4,5")

    def test_stages_that_are_not_blocks_are_refused(self):
        with self.assertRaisesRegex(RuntimeError, "each stage must hold a block of consecutive ranks"):
            check_stage_ranks([0, 1], 2, 8, "0")


if __name__ == "__main__":
    unittest.main()
