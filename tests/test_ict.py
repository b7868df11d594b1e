"""Inverse-cloze fine-tuning (02_index) on real papers: what the encoder learns on some papers carries over to papers it
never saw. Quality on questions is measured by the 04_structrag run (outputs/04_structrag/encoder_adaptation.md)."""
import pytest

from scholarqa.retrieval.dense import Encoder
from scholarqa.retrieval.adapt import ict_examples, fine_tune_ict, ict_loss


@pytest.fixture(scope='module')
def ux_papers():
    from scholarqa.datasets import load_dataset, DatasetUnavailable
    try: return load_dataset('unarxive').papers
    except DatasetUnavailable as e: pytest.skip(str(e))


def test_ict_training_carries_over_to_unseen_papers(ux_papers, tmp_path):
    enc = Encoder(progress=False)
    cut = len(ux_papers) * 3 // 4
    train = ict_examples(ux_papers[:cut], enc.tokenizer, n=64, seed=0)
    held = ict_examples(ux_papers[cut:], enc.tokenizer, n=64, seed=1)
    assert len(train) == 64 and len(held) == 64
    before = ict_loss(enc, held)
    rec = fine_tune_ict(train, tmp_path / 'model', model=enc.st, lr=5e-5, max_seq_length=128, seed=0, progress=False)
    after = ict_loss(Encoder(rec['path'], progress=False), held)
    assert rec['steps'] == 2 and not rec['reused']
    assert after < before - 0.02, (before, after)     # the loss on the other papers' sentences and paragraphs goes down
