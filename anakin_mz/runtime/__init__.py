"""The runtime every agent trains and is restored through, with no agent
code: the learner base (`learner`), the run loop (`run`: checkpoints,
resume, signals, progress, the periodic evaluation handed in; the steps it
compiled, `step_cache`), a study of several seeds as one program (`seeds`),
the device mesh (`mesh`, `host`, `scaling`), checkpoints (`checkpoint`),
model files (`export`) and restoring for evaluation (`restore`), the NaN
guard (`guard`), what a step reports (`metrics`, `console`) and its
TensorBoard writer (`summary`). It reads the agent registry
(`core.registry`) and imports no agent and no evaluation."""
