// @dtorch/hf schedulers: diffusers' samplers, the schedule on the host and the step as tensor ops.
export { FlowMatchEulerDiscreteScheduler, type FlowMatchEulerDiscreteSchedulerOutput, type SetTimestepsOptions, type SchedulerStepOptions } from './flow_match_euler_discrete_scheduler.js';
export { FlowMatchEulerDiscreteConfig, type TimeShiftType } from './flow_match_euler_discrete_config.js';
export { calculateShift } from './calculate_shift.js';
