/** Runs `work` with the environment variable `name` set to `value`, and puts back what it was (or its absence) however `work` ends. */
export async function withEnv<T>(name: string, value: string, work: () => Promise<T>): Promise<T> {
  const before = process.env[name];
  process.env[name] = value;
  try {
    return await work();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}
