"The evaluation floor: metrics (nbs/03b_evaluate), question files and sets (03h_questions), judges (03i_judges), and the one harness every comparison goes through (09_evaluate)."
