"The generation floor: LLM backends and the call cache (nbs/03_generate), answers and the QA-method registry (03a_answer)."
