// A tiny hash router: the app has a handful of screens and one parameter (the session id), and hash
// URLs survive a reload in both app:// and http:// without any server-side routing.
import { reactive } from 'vue';

export type Route =
  | { name: 'sessions' }
  | { name: 'session'; id: string }
  | { name: 'review' }
  | { name: 'checks' }
  | { name: 'training' }
  | { name: 'rollouts' }
  | { name: 'evaluate' }
  | { name: 'lessons' }
  | { name: 'chat' }
  | { name: 'export' }
  | { name: 'settings' };

function parse(hash: string): Route {
  const [, first = '', ...rest] = hash.replace(/^#/, '').split('/');
  switch (first) {
    case 'session':
      return rest.length ? { name: 'session', id: decodeURIComponent(rest.join('/')) } : { name: 'sessions' };
    case 'review':
    case 'checks':
    case 'training':
    case 'rollouts':
    case 'evaluate':
    case 'lessons':
    case 'chat':
    case 'export':
    case 'settings':
      return { name: first };
    default:
      return { name: 'sessions' };
  }
}

export function href(route: Route): string {
  return route.name === 'session' ? `#/session/${encodeURIComponent(route.id)}` : `#/${route.name}`;
}

export const router = reactive({ route: parse(location.hash) as Route });

window.addEventListener('hashchange', () => {
  router.route = parse(location.hash);
});

export function navigate(route: Route): void {
  location.hash = href(route);
}
