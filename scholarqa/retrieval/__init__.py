"The retrieval floor: vocabulary (nbs/02_retrieval), chunkers, BM25, fusion, dense, SPLADE, adaptation, the index store (02a–02g)."
