"Readers, one module per format family (nbs/00a_readers … 00e_pdf); each registers its formats with `scholarqa.readers.base.register_reader`."
