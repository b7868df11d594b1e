"The knowledge graph floor: RDF (nbs/01_kg), scholarly entities (01a_entities), scholarly graphs (01b_graphs)."
