"""An evaluator users run on their own masked-LM model and documents: the model beside the chunked reader of the
same checkpoint, on the masked-LM loss under a fixed masking, the loss on the words only long context can see, and
passage retrieval, each with its count and its standard error over documents (``hf-effattn evaluate``; the guide:
``docs/evaluating.md``)."""

from .documents import read_documents
from .evaluator import evaluate
from .report import Comparison, EvaluationReport
from .standard_error import Estimate

__all__ = ["evaluate", "read_documents", "EvaluationReport", "Comparison", "Estimate"]
