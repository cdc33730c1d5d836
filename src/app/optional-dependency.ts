import { StartupError } from './startup-error.js'

/** Loads a module behind an optional native dependency, failing start-up clearly when it is missing. */
export async function optional<T>(load: () => Promise<T>, pkg: string, setting: string): Promise<T> {
  try {
    return await load()
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    if (
      e.code === 'ERR_MODULE_NOT_FOUND' ||
      e.code === 'MODULE_NOT_FOUND' ||
      /Cannot find (module|package)/.test(e.message ?? '') ||
      /\.node\b/.test(e.message ?? '')
    ) {
      throw new StartupError(
        `${setting} needs the optional dependency ${pkg}, which could not be loaded (${e.message.split('\n')[0]}). Install it or switch the capability off.`,
      )
    }
    throw err
  }
}
