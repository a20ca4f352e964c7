"""The runtime every agent trains and is restored through: the learner base
(`learner`) and the Anakin step of the model-based agents (`anakin`), the
run loop (`run`: checkpoints, resume, signals, evaluation, progress; the
steps it compiled, `step_cache`), a study of several seeds as one program
(`seeds`), the device mesh (`mesh`, `host`, `scaling`), checkpoints
(`checkpoint`) and
restoring for evaluation (`restore`), the NaN guard (`guard`), what a step
reports (`metrics`) and its TensorBoard writer (`summary`), and the agent
registry (`registry`) the agents register into and the runtime reads."""
