"""Candidate search: several plans per attempt, filtered by the act rules, verified away from the tree.

`asker.Asker` builds and sends each request (the need round, the server's context, the schema's paths
and definitions); `search.CandidateSearch` draws, filters and ranks (`compare`: the same code, the
same change, a symptom patch; `parts`: a value group's reply tried one change at a time); `validate`
verifies a candidate on the workspace's mirror (`Isolated`) or, where that cannot be done, in place
(`InPlace`); `attempts.run_attempts` asks again after a failed attempt and puts the winner into the
tree through the one callable the cycle lends (`IntoTree`); `settle` says what an attempt that kept
nothing means.
"""

from autod.candidates.asker import Asker
from autod.candidates.attempts import Tried
from autod.candidates.candidate import IntoTree, Written
from autod.candidates.compare import change_key
from autod.candidates.search import AttemptResult, Candidate, CandidateSearch
from autod.candidates.validate import InPlace, Isolated

__all__ = ["Asker", "AttemptResult", "Candidate", "CandidateSearch", "InPlace", "IntoTree", "Isolated",
           "Tried", "Written", "change_key"]
