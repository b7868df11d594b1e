"Seed 001's parts: the academic-question task built from a citation graph (nbs/06a_aqa_task) and the channels that rank its candidates (06c_channels)."
